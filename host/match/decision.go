package match

// Outcomes of a ranking, as kip counts its decisions
// (kip_match_decisions_total).
const (
	OutcomePlaced        = "placed"        // at least one candidate
	OutcomeUnsatisfiable = "unsatisfiable" // nothing fits the pod (an *UnsatisfiableError)
	OutcomeError         = "error"         // anything else: the catalog could not be read
)

// Outcome names the result of PodRequirements and Rank: err nil is
// OutcomePlaced.
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomePlaced
	case IsUnsatisfiable(err):
		return OutcomeUnsatisfiable
	default:
		return OutcomeError
	}
}

// FellBack reports whether the best candidate is of another capacity type
// than the first one req accepts: a spot pod that may fall back ranked on
// on-demand first, because no spot offering fits or has capacity.
func FellBack(req Requirements, cands []Candidate) bool {
	return len(cands) > 0 && len(req.CapacityTypes) > 0 && cands[0].CapacityType != req.CapacityTypes[0]
}
