package admission

import (
	"errors"
	"fmt"
	"math"
	"unicode"
)

// The executors' token is what a SPARKDAP/2 hello proves knowledge of, and
// one unfinished hello hands whoever reaches the executor port an HMAC of
// the proxy's proof, keyed with the token, to test guesses against
// offline, at millions a second. No rate limit helps then: only a token
// with enough entropy does. How much a token has cannot be known from the
// string; TokenBits gives a conservative figure from its length and the
// classes of characters it uses, as if each character were drawn at
// random from those classes. So it is an upper bound for a word or a
// pattern, and exact for what a generator makes (`openssl rand -hex 16`:
// 32 hex digits, 128 bits).

// MinTokenBits is the least TokenBits a token must have.
const MinTokenBits = 128

// ErrWeakToken is a token under MinTokenBits; errors.As gives the
// *WeakTokenError.
var ErrWeakToken = errors.New("token too weak")

// WeakTokenError is a token under MinTokenBits.
type WeakTokenError struct {
	// Bits is TokenBits of the token.
	Bits int
}

func (e *WeakTokenError) Error() string {
	return fmt.Sprintf("token too weak: about %d bits of entropy, under the %d required", e.Bits, MinTokenBits)
}

// Unwrap makes errors.Is(err, ErrWeakToken) hold.
func (e *WeakTokenError) Unwrap() error { return ErrWeakToken }

// CheckTokenStrength returns a *WeakTokenError if token has fewer than
// MinTokenBits (TokenBits).
func CheckTokenStrength(token string) error {
	if b := TokenBits(token); b < MinTokenBits {
		return &WeakTokenError{Bits: b}
	}
	return nil
}

// minDistinct is the fewest distinct characters a token may use before
// its alphabet counts as only those: "aaaa…" or "abab…" is no lowercase
// string. 32 random hex digits use fewer than 8 of the 16 once in ~10⁸.
const minDistinct = 8

// TokenBits estimates the entropy of token in bits, rounded down: its
// length in characters times log2 of its alphabet. The alphabet is the
// smallest that holds every character: 10 for decimal digits, 16 for hex
// digits of one case, else the sum of the classes used (26 lowercase
// letters, 26 uppercase, 10 digits, 33 other printable ASCII, and 128 for
// anything beyond ASCII); a token of fewer than minDistinct distinct
// characters counts as drawn from those alone.
func TokenBits(token string) int {
	var lower, upper, digit, other, wide, beyondF bool
	distinct := map[rune]bool{}
	n := 0
	for _, r := range token {
		n++
		distinct[r] = true
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
			beyondF = beyondF || r > 'f'
		case r >= 'A' && r <= 'Z':
			upper = true
			beyondF = beyondF || r > 'F'
		case r >= '0' && r <= '9':
			digit = true
		case r < 0x80 && unicode.IsPrint(r):
			other = true
		default:
			wide = true
		}
	}
	isHex := !other && !wide && !(lower && upper) && !beyondF
	alphabet := 0
	switch {
	case n == 0:
		return 0
	case digit && !lower && !upper && !other && !wide:
		alphabet = 10
	case isHex:
		alphabet = 16
	default:
		for _, c := range []struct {
			used bool
			size int
		}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}, {wide, 128}} {
			if c.used {
				alphabet += c.size
			}
		}
	}
	if len(distinct) < minDistinct {
		alphabet = min(alphabet, len(distinct))
	}
	if alphabet <= 1 {
		return 0
	}
	return int(math.Floor(float64(n) * math.Log2(float64(alphabet))))
}
