package ack

import (
	"crypto/sha256"
	"encoding/hex"
)

// Digest returns the lowercase hex SHA-256 of b: the form of every digest on
// courier's wire and in its tables.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
