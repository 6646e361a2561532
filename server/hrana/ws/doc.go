// Package ws serves Hrana over WebSocket (versions 1 to 3, JSON and
// protobuf). One connection multiplexes streams; each stream is a
// stream.Stream, as the HTTP pipeline knows it (its own transaction state,
// session and quota slot), run by its own worker, so requests on one stream
// run in order while streams run side by side.
package ws
