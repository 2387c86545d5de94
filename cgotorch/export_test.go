package cgotorch

// LookupLoopC exposes lookupLoopC to the external tests and benchmarks of this package.
var LookupLoopC = lookupLoopC
