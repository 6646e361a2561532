package hrana

// Hrana's own error codes, which its clients know; codes of the domain
// (dberr) pass through as they are.
const (
	CodeInternalError      = "INTERNAL_ERROR"
	CodeProtocolError      = "PROTOCOL_ERROR"
	CodeStreamLimit        = "STREAM_LIMIT"
	CodeStreamClosed       = "STREAM_CLOSED"
	CodeSQLStoreFull       = "SQL_STORE_FULL"
	CodeTransactionTimeout = "TRANSACTION_TIMEOUT"
	CodeRequestTimeout     = "REQUEST_TIMEOUT"
	CodeMethodNotAllowed   = "METHOD_NOT_ALLOWED"
)
