package proto

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of Hrana over WebSocket (HRANA_3_SPEC.md, "Hrana over
// WebSocket"), in JSON and protobuf. A request's statement fields are the
// HTTP stream request's, so both variants share one executor.

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

// wsRequestFields numbers RequestMsg's and ResponseOkMsg's oneof.
var wsRequestFields = map[string]protowire.Number{
	"open_stream": 2, "close_stream": 3, "execute": 4, "batch": 5, "open_cursor": 6, "close_cursor": 7,
	"fetch_cursor": 8, "sequence": 9, "describe": 10, "store_sql": 11, "close_sql": 12, "get_autocommit": 13,
}

var wsRequestTypes = func() map[protowire.Number]string {
	m := map[protowire.Number]string{}
	for typ, num := range wsRequestFields {
		m[num] = typ
	}
	return m
}()

func DecodeClientMsgJSON(data []byte) (*ClientMsg, error) {
	var msg ClientMsg
	if err := json.Unmarshal(data, &msg); err != nil {
		return nil, fmt.Errorf("message is not Hrana JSON: %w", err)
	}
	return &msg, nil
}

func DecodeClientMsgProtobuf(data []byte) (*ClientMsg, error) {
	var msg ClientMsg
	err := pbEach(data, func(f pbField) error {
		m, err := f.message()
		if err != nil {
			return err
		}
		switch f.num {
		case 1:
			msg = ClientMsg{Type: "hello"}
			return pbEach(m, func(f pbField) error {
				if f.num == 1 {
					s, err := f.str()
					msg.JWT = &s
					return err
				}
				return nil
			})
		case 2:
			msg = ClientMsg{Type: "request", RequestID: new(int32)}
			return pbEach(m, func(f pbField) error {
				if f.num == 1 {
					id, err := f.int32()
					*msg.RequestID = id
					return err
				}
				typ, ok := wsRequestTypes[f.num]
				if !ok {
					return nil
				}
				body, err := f.message()
				if err != nil {
					return err
				}
				msg.Request, err = pbDecodeWSRequest(typ, body)
				return err
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("message is not a Hrana protobuf ClientMsg: %w", err)
	}
	return &msg, nil
}

// pbDecodeWSRequest decodes one request body. proto3 leaves zero ids out,
// so the ids a request type has start at 0.
func pbDecodeWSRequest(typ string, b []byte) (*WSRequest, error) {
	req := &WSRequest{StreamRequest: StreamRequest{Type: typ}}
	zero := func() *int32 { return new(int32) }
	switch typ {
	case "store_sql", "close_sql":
		return req, pbDecodeRequestFields(b, &req.StreamRequest, 0)
	case "close_cursor":
		req.CursorID = zero()
	case "fetch_cursor":
		req.CursorID, req.MaxCount = zero(), new(uint32)
	case "open_cursor":
		req.StreamID, req.CursorID = zero(), zero()
	default:
		req.StreamID = zero()
	}
	err := pbEach(b, func(f pbField) error {
		var err error
		switch {
		case f.num == 1 && req.StreamID != nil:
			*req.StreamID, err = f.int32()
		case f.num == 1 && req.CursorID != nil:
			*req.CursorID, err = f.int32()
		case typ == "fetch_cursor" && f.num == 2:
			*req.MaxCount, err = f.uint32()
		case typ == "open_cursor" && f.num == 2:
			*req.CursorID, err = f.int32()
		case typ == "open_cursor" && f.num == 3:
			var m []byte
			if m, err = f.message(); err == nil {
				req.Batch, err = pbDecodeBatch(m)
			}
		}
		return err
	})
	if err == nil && typ != "open_cursor" {
		err = pbDecodeRequestFields(b, &req.StreamRequest, 1)
	}
	return req, err
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

func EncodeServerMsg(msg *ServerMsg, protobuf bool) ([]byte, error) {
	if !protobuf {
		return json.Marshal(msg)
	}
	w := &pbWriter{}
	var err error
	switch msg.Type {
	case "hello_ok":
		w.message(1, func(*pbWriter) {})
	case "hello_error":
		w.message(2, func(w *pbWriter) { w.message(1, func(w *pbWriter) { pbError(w, msg.Error) }) })
	case "response_error":
		w.message(4, func(w *pbWriter) {
			w.uvarint(1, uint64(int64(*msg.RequestID)))
			w.message(2, func(w *pbWriter) { pbError(w, msg.Error) })
		})
	default:
		w.message(3, func(w *pbWriter) {
			w.uvarint(1, uint64(int64(*msg.RequestID)))
			if resp, ok := msg.Response.(FetchCursorResp); ok {
				w.message(wsRequestFields["fetch_cursor"], func(w *pbWriter) {
					for _, e := range resp.Entries {
						w.message(1, func(w *pbWriter) { pbCursorEntry(w, e) })
					}
					w.boolean(2, resp.Done)
				})
				return
			}
			err = pbStreamResponse(w, msg.Response, wsRequestFields)
		})
	}
	return w.b, err
}
