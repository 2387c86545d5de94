package cgotorch

// The C and C++ sources are in csrc/ by component, included by the unity_* translation units
// here. This import makes an edit there rebuild cgotorch (see csrc/embed.go).
import _ "github.com/gorec/gorec/cgotorch/csrc"
