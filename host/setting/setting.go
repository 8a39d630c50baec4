package setting

import "fmt"

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
