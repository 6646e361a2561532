package proto

import (
	"encoding/json"
	"fmt"
)

// The messages of Hrana over WebSocket (libSQL's https://github.com/tursodatabase/libsql/blob/main/docs/HRANA_3_SPEC.md, "Hrana over
// WebSocket"), and their JSON encoding (server/hrana/hranapb has the
// protobuf one). A request's statement fields are the HTTP stream request's,
// so both transports share one executor.

// ClientMsg is a message from the client: a hello or a request.
type ClientMsg struct {
	Type      string     `json:"type"`
	JWT       *string    `json:"jwt"`
	RequestID *int32     `json:"request_id"`
	Request   *WSRequest `json:"request"`
}

// WSRequest is a WebSocket request: a stream request plus the stream and
// cursor it addresses.
type WSRequest struct {
	StreamRequest
	StreamID *int32  `json:"stream_id"`
	CursorID *int32  `json:"cursor_id"`
	MaxCount *uint32 `json:"max_count"`
}

// WSMinVersion is the Hrana version that introduced each request.
var WSMinVersion = map[string]int{
	"open_stream": 1, "close_stream": 1, "execute": 1, "batch": 1,
	"sequence": 2, "describe": 2, "store_sql": 2, "close_sql": 2,
	"open_cursor": 3, "close_cursor": 3, "fetch_cursor": 3, "get_autocommit": 3,
}

// DecodeClientMsg decodes a JSON client message.
func DecodeClientMsg(data []byte) (*ClientMsg, error) {
	var msg ClientMsg
	if err := json.Unmarshal(data, &msg); err != nil {
		return nil, fmt.Errorf("message is not Hrana JSON: %w", err)
	}
	return &msg, nil
}

// ServerMsg is a message to the client.
type ServerMsg struct {
	Type      string `json:"type"` // hello_ok, hello_error, response_ok, response_error
	RequestID *int32 `json:"request_id,omitempty"`
	Response  any    `json:"response,omitempty"`
	Error     *Error `json:"error,omitempty"`
}

// FetchCursorResp is the response to fetch_cursor.
type FetchCursorResp struct {
	Type    string        `json:"type"`
	Entries []CursorEntry `json:"entries"`
	Done    bool          `json:"done"`
}
