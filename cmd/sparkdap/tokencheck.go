package main

import (
	"errors"
	"fmt"

	"github.com/sparkdap/sparkdap/admission"
)

// tokenHowTo says how to make a token that passes admission.CheckTokenStrength.
const tokenHowTo = "generate one with `openssl rand -hex 16` or `python3 -c 'import secrets; print(secrets.token_hex(16))'`"

// Why a weak token matters, by whose token it is.
const (
	executorTokenRisk = "one hello lets anyone who reaches the executor port test guesses offline"
	ideTokenRisk      = "any local user can try guesses at the IDE port"
)

// checkToken refuses a token under admission.MinTokenBits unless allowWeak
// (--allow-weak-token). from names where the token came from (a flag, a
// file, a variable) and risk what a weak one allows, for the message.
// With allowWeak a weak token returns the warning to print instead.
func checkToken(token, from, risk string, allowWeak bool) (warning string, err error) {
	err = admission.CheckTokenStrength(token)
	var we *admission.WeakTokenError
	if !errors.As(err, &we) {
		return "", err
	}
	if allowWeak {
		return fmt.Sprintf("sparkdap: warning: the token from %s has about %d bits of entropy, under %d, and --allow-weak-token "+
			"accepts it: %s; %s", from, we.Bits, admission.MinTokenBits, risk, tokenHowTo), nil
	}
	return "", fmt.Errorf("%s: %w: %s; %s, or pass --allow-weak-token to use this one anyway", from, err, risk, tokenHowTo)
}
