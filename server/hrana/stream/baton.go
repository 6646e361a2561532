package stream

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// A baton names one stream at one point of its life: the stream's random id,
// a sequence number that every response advances (so a baton is single use),
// and an HMAC over both, the database name and the identity of the caller
// that opened the stream (so a baton cannot be forged, carried over to
// another database, or continued by another token).

const (
	streamIDLen = 16
	batonMACLen = 16
	batonLen    = streamIDLen + 8 + batonMACLen
)

type streamID [streamIDLen]byte

type batonSigner struct{ key []byte }

// batonEncoding is strict: a baton differing only in the unused bits of its
// last character is another string, so it is refused rather than accepted
// as the same bytes.
var batonEncoding = base64.RawURLEncoding.Strict()

func (s batonSigner) mac(id streamID, seq uint64, db, owner string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(id[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	m.Write(n[:])
	// Length-prefixed so that no (db, owner) pair can collide with another.
	binary.BigEndian.PutUint64(n[:], uint64(len(db)))
	m.Write(n[:])
	m.Write([]byte(db))
	m.Write([]byte(owner))
	return m.Sum(nil)[:batonMACLen]
}

func (s batonSigner) encode(id streamID, seq uint64, db, owner string) string {
	b := make([]byte, 0, batonLen)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, s.mac(id, seq, db, owner)...)
	return batonEncoding.EncodeToString(b)
}

// parse splits a canonically encoded baton without checking its MAC.
func parseBaton(baton string) (id streamID, seq uint64, mac []byte, ok bool) {
	b, err := batonEncoding.DecodeString(baton)
	if err != nil || len(b) != batonLen || batonEncoding.EncodeToString(b) != baton {
		return id, 0, nil, false
	}
	copy(id[:], b[:streamIDLen])
	seq = binary.BigEndian.Uint64(b[streamIDLen : streamIDLen+8])
	return id, seq, b[streamIDLen+8:], true
}

// decode verifies a baton for database db and caller owner and returns its
// stream and sequence.
func (s batonSigner) decode(baton, db, owner string) (streamID, uint64, bool) {
	id, seq, mac, ok := parseBaton(baton)
	if !ok || !hmac.Equal(mac, s.mac(id, seq, db, owner)) {
		return id, 0, false
	}
	return id, seq, true
}
