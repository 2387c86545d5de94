package cgotorch

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cgotorch exports what users need of libtorch: tensors, scopes, autograd, devices and errors.
// The embedding tables' Go binding is internal/ctable and the process groups' internal/cdist:
// no Go file here calls their C ABI (ct_table_*, ct_dist_*), and no exported name here is
// theirs.
func TestNoTableAPI(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(src, []byte("C.ct_table")) {
			t.Errorf("%s calls the tables' C ABI; their binding belongs in internal/ctable", name)
		}
		if bytes.Contains(src, []byte("C.ct_dist")) {
			t.Errorf("%s calls the process groups' C ABI; their binding belongs in internal/cdist", name)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range exportedNames(f) {
			checked++
			if strings.Contains(strings.ToLower(id.Name), "table") {
				t.Errorf("%v: cgotorch exports %s; the tables' binding belongs in internal/ctable", fset.Position(id.Pos()), id.Name)
			}
			if strings.HasPrefix(id.Name, "Dist") {
				t.Errorf("%v: cgotorch exports %s; the process groups' binding belongs in internal/cdist", fset.Position(id.Pos()), id.Name)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no exported names found")
	}
}

// exportedNames are the exported functions, methods, types, constants and variables of f.
func exportedNames(f *ast.File) []*ast.Ident {
	var ids []*ast.Ident
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			ids = append(ids, d.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					ids = append(ids, s.Name)
				case *ast.ValueSpec:
					ids = append(ids, s.Names...)
				}
			}
		}
	}
	out := ids[:0]
	for _, id := range ids {
		if id.IsExported() {
			out = append(out, id)
		}
	}
	return out
}
