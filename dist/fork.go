package dist

import (
	"errors"
	"strings"
)

// Fork starts a second group of the same ranks (collective: every rank calls it with the same
// name), with Gloo connections of its own, meeting through this group's store under a key
// prefix of its own (rank 0's store server, if it serves one, is this group's: close the fork
// first). The two groups' collectives run independently, each group's in the order its calls
// come: a TrainPipeline fetches on a fork while the Step runs on the first group. The fork has
// this group's options (timeout, job, interface, backend).
func (g *Group) Fork(name string) (*Group, error) {
	if name == "" || strings.Contains(name, "/") {
		return nil, &Error{Op: "fork", Kind: ErrInvalidArgument, Err: errors.New("the name is empty or holds a slash")}
	}
	o := g.opts
	o.Store.prefix += "/fork/" + name
	o.Store.client = o.Store.client || o.Store.path == "" // rank 0's server runs already
	return New(o)
}
