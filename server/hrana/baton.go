package hrana

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// A baton names one stream at one point of its life: the stream's random id,
// a sequence number that every response advances (so a baton is single use),
// and an HMAC over both and the database name (so a baton cannot be forged or
// carried over to another database).

const (
	streamIDLen = 16
	batonMACLen = 16
	batonLen    = streamIDLen + 8 + batonMACLen
)

type streamID [streamIDLen]byte

type batonSigner struct{ key []byte }

func (s batonSigner) mac(id streamID, seq uint64, db string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(id[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	m.Write(n[:])
	m.Write([]byte(db))
	return m.Sum(nil)[:batonMACLen]
}

func (s batonSigner) encode(id streamID, seq uint64, db string) string {
	b := make([]byte, 0, batonLen)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, s.mac(id, seq, db)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decode verifies a baton for database db and returns its stream and sequence.
func (s batonSigner) decode(baton, db string) (streamID, uint64, bool) {
	var id streamID
	b, err := base64.RawURLEncoding.DecodeString(baton)
	if err != nil || len(b) != batonLen {
		return id, 0, false
	}
	copy(id[:], b[:streamIDLen])
	seq := binary.BigEndian.Uint64(b[streamIDLen : streamIDLen+8])
	if !hmac.Equal(b[streamIDLen+8:], s.mac(id, seq, db)) {
		return id, 0, false
	}
	return id, seq, true
}
