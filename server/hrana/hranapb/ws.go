package hranapb

import (
	"fmt"

	"github.com/sluicedb/sluice/server/hrana/proto"
	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of Hrana over WebSocket in protobuf (libSQL's https://github.com/tursodatabase/libsql/blob/main/docs/HRANA_3_SPEC.md, "Hrana
// over WebSocket").

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

// DecodeClientMsg decodes a protobuf ClientMsg.
func DecodeClientMsg(data []byte) (*proto.ClientMsg, error) {
	var msg proto.ClientMsg
	err := pbEach(data, func(f pbField) error {
		m, err := f.message()
		if err != nil {
			return err
		}
		switch f.num {
		case 1:
			msg = proto.ClientMsg{Type: "hello"}
			return pbEach(m, func(f pbField) error {
				if f.num == 1 {
					s, err := f.str()
					msg.JWT = &s
					return err
				}
				return nil
			})
		case 2:
			msg = proto.ClientMsg{Type: "request", RequestID: new(int32)}
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
func pbDecodeWSRequest(typ string, b []byte) (*proto.WSRequest, error) {
	req := &proto.WSRequest{StreamRequest: proto.StreamRequest{Type: typ}}
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

// EncodeServerMsg encodes a protobuf ServerMsg.
func EncodeServerMsg(msg *proto.ServerMsg) ([]byte, error) {
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
			if resp, ok := msg.Response.(proto.FetchCursorResp); ok {
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
