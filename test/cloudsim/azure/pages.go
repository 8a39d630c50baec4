package azuresim

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// listed is one item of a list: its position (increasing in list order)
// and its JSON.
type listed struct {
	seq  uint64
	item any
}

// pageOf answers a list with the page of items that q's $skiptoken asks
// for, at most the page size, and a nextLink to the next page (the
// request's URL with $skiptoken, as ARM writes it) unless it is the last.
// The caller holds s.mu.
func (s *Server) pageOf(q request, items []listed) (*answer, error) {
	v := q.r.URL.Query()
	var from uint64
	if t := v.Get("$skiptoken"); t != "" {
		n, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return nil, invalidParameter("$skiptoken", fmt.Sprintf("The value '%s' of parameter '$skiptoken' is invalid.", t))
		}
		from = n
	}
	page := []any{}
	next := ""
	for _, it := range items {
		if it.seq < from {
			continue
		}
		if len(page) == s.pageSize {
			v.Set("$skiptoken", strconv.FormatUint(it.seq, 10))
			next = (&url.URL{Scheme: "https", Host: q.r.Host, Path: q.r.URL.Path, RawQuery: v.Encode()}).String()
			break
		}
		page = append(page, it.item)
	}
	out := map[string]any{"value": page}
	if next != "" {
		out["nextLink"] = next
	}
	return &answer{status: http.StatusOK, body: out}, nil
}
