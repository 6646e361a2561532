// Package stream is Hrana's core, shared by its HTTP and WebSocket
// transports: streams (logical connections that outlive a request), their
// quotas and signed single-use batons, and the execution of Hrana requests
// on them.
//
// Outside a transaction a stream's statements run on dbhost's read pool
// (read-only statements) or in dbhost's group commit (everything else); a
// stream that opens a transaction holds a dbhost.Session until it is back in
// autocommit. The transports decide how a refusal or an error is answered.
package stream
