package gcesim

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
)

// pageParams reads a list's maxResults (0 to 500; 0 or none is 500) and
// the position its pageToken names (0 without one), or GCE's invalid
// error.
func pageParams(v url.Values) (limit int, from uint64, err error) {
	limit = 500
	if m := v.Get("maxResults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 || n > 500 {
			return 0, 0, invalid("maxResults", m, "Must be between 0 and 500.")
		}
		if n > 0 {
			limit = n
		}
	}
	if t := v.Get("pageToken"); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		if err == nil {
			from, err = strconv.ParseUint(string(b), 10, 64)
		}
		if err != nil {
			return 0, 0, invalid("pageToken", t, "Invalid page token.")
		}
	}
	return limit, from, nil
}

// pageToken is the opaque token of the page that starts at position.
func pageToken(position uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatUint(position, 10)))
}

// staticPage pages a list of n items that does not change between calls:
// the page is items[from:to], and next is the token of the next page, ""
// on the last.
func staticPage(q request, n int) (from, to int, next string, err error) {
	limit, start, err := pageParams(q.r.URL.Query())
	if err != nil {
		return 0, 0, "", err
	}
	from = int(min(start, uint64(n)))
	to = min(from+limit, n)
	if to < n {
		next = pageToken(uint64(to))
	}
	return from, to, next, nil
}

// pagedList is the page of all, a list that does not change between
// calls, that the request asks for, as GCE writes a list: kind, id,
// selfLink, items (left out when empty) and nextPageToken (left out on
// the last page).
func pagedList[T any](q request, kind, id, selfLink string, all []T) (map[string]any, error) {
	from, to, next, err := staticPage(q, len(all))
	if err != nil {
		return nil, err
	}
	out := map[string]any{"kind": kind, "id": id, "selfLink": selfLink}
	if to > from {
		out["items"] = all[from:to]
	}
	if next != "" {
		out["nextPageToken"] = next
	}
	return out, nil
}

// noResultsOnPage is an aggregatedList's scope without items on the page,
// as GCE writes it.
func noResultsOnPage(scope string) map[string]any {
	return map[string]any{"warning": map[string]any{
		"code":    "NO_RESULTS_ON_PAGE",
		"message": fmt.Sprintf("There are no results for scope '%s' on this page.", scope),
		"data":    []any{map[string]any{"key": "scope", "value": scope}},
	}}
}
