package rpc

import "github.com/agentwire/agentwire/jsonrpc"

// inflightTable holds the requests in flight by id, under Conn.mu. Its
// first entry lives inline, so a connection that serves one request at a
// time (one HTTP request's, a sequential stdio client's) never makes a map.
type inflightTable struct {
	one  *Request // keyed by one.ID; nil when empty
	more map[jsonrpc.ID]*Request
}

func (t *inflightTable) get(id jsonrpc.ID) *Request {
	if t.one != nil && t.one.ID == id {
		return t.one
	}
	return t.more[id]
}

// put enters req, whose id the caller has checked is not in the table.
func (t *inflightTable) put(req *Request) {
	if t.one == nil {
		t.one = req
		return
	}
	if t.more == nil {
		t.more = make(map[jsonrpc.ID]*Request)
	}
	t.more[req.ID] = req
}

func (t *inflightTable) remove(id jsonrpc.ID) {
	if t.one != nil && t.one.ID == id {
		t.one = nil
		return
	}
	delete(t.more, id)
}
