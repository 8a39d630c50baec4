package match

import "errors"

// EventReason is the Kubernetes event reason for an unsatisfiable pod.
const EventReason = "Unsatisfiable"

// UnsatisfiableError says why no cell can be launched for a pod: a bad
// annotation, a constraint no instance type meets, an unknown type. The pod
// stays Pending; Reason is meant for its event and status message as is.
type UnsatisfiableError struct {
	Reason string

	rule rule // the catalog rule that left nothing, for Rank's; ruleNone for PodRequirements'
}

func (e *UnsatisfiableError) Error() string { return e.Reason }

// IsUnsatisfiable reports whether err is, or wraps, an *UnsatisfiableError.
func IsUnsatisfiable(err error) bool {
	var u *UnsatisfiableError
	return errors.As(err, &u)
}

func unsatisfiable(reason string) error { return &UnsatisfiableError{Reason: reason} }
