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

// IsDigest reports whether s is a digest as Digest writes it: 64 lowercase
// hex characters.
func IsDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// IsToken reports whether s is a token: a notification id, key id or code:
// 1 to 256 characters of A-Z a-z 0-9 _ . : -.
func IsToken(s string) bool {
	return isTokenN(s, 256)
}

func isTokenN(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}
