module github.com/gorec/gorec

go 1.24
