// Package csrc holds cgotorch's C and C++ sources by component: tensor/ (tensors, ops, scopes,
// autograd), table/ (the embedding tables' engine), idmap/ (the id map, plain C) and dist/ (the
// process groups). cgo compiles only the files in a package's own folder, so cgotorch's unity
// translation units (cgotorch/unity_*.cc, unity_idmap*.c) include these sources from here.
//
// The package has no API. It exists for the go command's build cache: the go command hashes no
// file of a subfolder into a package's cache key, so an edited source here would leave a stale
// cgotorch in the cache. The embed below makes the folders' files inputs of this package, and
// cgotorch imports it, so that editing any of them rebuilds cgotorch (TestEditedSourceRebuilds).
// The variable is never referenced: nothing is added to a binary.
package csrc

import "embed"

// A new component folder goes into this list too (TestUnitySourcesIncludedOnce checks it).
//
//go:embed tensor table idmap dist
var _ embed.FS
