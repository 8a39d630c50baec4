package setting

import (
	"errors"
	"fmt"
)

// Error is a setting that failed validation.
type Error struct {
	// Key is the setting's key within its component's section of kip.yaml,
	// as kip.yaml spells it: "taint", "capacity.cpu".
	Key string
	// Reason says what is wrong, in one line.
	Reason string
}

func (e *Error) Error() string { return e.Key + ": " + e.Reason }

// Errorf returns an *Error for key with a formatted reason.
func Errorf(key, format string, args ...any) error {
	return &Error{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// Keys lists the keys of the *Errors in err, joined (errors.Join) at any
// depth, in order; an error that is no *Error is listed as "". Tests of a
// Validate compare it with the keys they expect.
func Keys(err error) []string {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var keys []string
		for _, e := range joined.Unwrap() {
			keys = append(keys, Keys(e)...)
		}
		return keys
	}
	var serr *Error
	if errors.As(err, &serr) {
		return []string{serr.Key}
	}
	return []string{""}
}
