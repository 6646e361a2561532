package dberr

// CodeTooBig: an answer (or a value) larger than the server's limit, which
// the message names; SQLite's own code for a string or blob too large.
const CodeTooBig = "SQLITE_TOOBIG"
