package admission

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"testing"
)

// TestTokenStrength: what the usual generators make passes; what a person
// types, a short number, a pattern, does not.
func TestTokenStrength(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		strong      bool
	}{
		{"the old usage example", "s3cret", false},
		{"6 digits", "493027", false},
		{"a word", "password", false},
		{"38 digits", "12345678901234567890123456789012345678", false}, // 126 bits
		{"39 digits", "123456789012345678901234567890123456789", true},
		{"hex of 15 bytes", "0123456789abcdef0123456789abcd", false},
		{"words, digits, dashes (counted by class, not by words)", "integration-token-4b1d", true},
		{"one letter repeated", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"two letters alternating", "abababababababababababababababababababababababababababab", false},
		{"openssl rand -hex 16", "9f86d081884c7d659a2feaa0c55ad015", true},
		{"upper hex 16 bytes", "9F86D081884C7D659A2FEAA0C55AD015", true},
		{"token_urlsafe(16)", "Xq3_7lA-Zp0uKc9Tn2WbVg", true},
		{"openssl rand -base64 16", "n4bQgYhMfWWaL+qgxVrQFa==", true},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTokenStrength(tc.token)
			var we *WeakTokenError
			switch {
			case tc.strong && err != nil:
				t.Errorf("%q refused: %v", tc.token, err)
			case !tc.strong && (!errors.As(err, &we) || !errors.Is(err, ErrWeakToken) || we.Bits >= MinTokenBits):
				t.Errorf("%q accepted (%v, %d bits)", tc.token, err, TokenBits(tc.token))
			}
		})
	}
}

// TestGeneratedTokensPass: every token the documented generators make
// (openssl rand -hex 16, secrets.token_hex(16), openssl rand -base64 16)
// passes, not just one lucky draw. (Unpadded base64 of 16 bytes may not:
// 22 letters and nothing else count as 125 bits.)
func TestGeneratedTokensPass(t *testing.T) {
	b := make([]byte, 16)
	for range 2000 {
		_, _ = rand.Read(b)
		for _, tok := range []string{hex.EncodeToString(b), base64.StdEncoding.EncodeToString(b)} {
			if err := CheckTokenStrength(tok); err != nil {
				t.Fatalf("%q: %v", tok, err)
			}
		}
	}
}
