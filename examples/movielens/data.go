package main

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
)

// ErrNoData says that the ratings could not be found nor extracted (R or r-cran-dslabs missing).
var ErrNoData = errors.New("movielens data not available")

// Rating is one explicit rating.
type Rating struct {
	User, Item int64
	Value      float32
	Time       int64
}

// extractScript writes the four columns used here of dslabs::movielens as CSV to the path given
// as its argument (the data frame also holds titles, years and genres).
const extractScript = `a <- commandArgs(TRUE)
m <- dslabs::movielens
write.csv(m[, c("userId", "movieId", "rating", "timestamp")], a[1], row.names = FALSE)`

// EnsureData returns the ratings CSV at path, extracting it first from Debian's r-cran-dslabs
// package with Rscript when the file does not exist. The file is written under a temporary name
// and renamed, so an interrupted extraction leaves nothing behind.
func EnsureData(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	rscript, err := exec.LookPath("Rscript")
	if err != nil {
		return fmt.Errorf("%w: %s is missing and Rscript is not installed (apt-get install r-cran-dslabs, or `make deps`)", ErrNoData, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	out, err := exec.Command(rscript, "--vanilla", "-e", extractScript, tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: extracting dslabs::movielens with Rscript (is r-cran-dslabs installed?): %v: %s", ErrNoData, err, out)
	}
	return os.Rename(tmp, path)
}

// LoadRatings reads the CSV written by EnsureData: a header naming userId, movieId, rating and
// timestamp, then one rating per line.
func LoadRatings(path string) ([]Rating, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	need := []string{"userId", "movieId", "rating", "timestamp"}
	idx := make([]int, len(need))
	for i, name := range need {
		c, ok := col[name]
		if !ok {
			return nil, fmt.Errorf("%s: no column %q in header %v", path, name, header)
		}
		idx[i] = c
	}
	var out []Rating
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var v [4]float64
		for i, c := range idx {
			if v[i], err = strconv.ParseFloat(rec[c], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", path, line, need[i], err)
			}
		}
		out = append(out, Rating{User: int64(v[0]), Item: int64(v[1]), Value: float32(v[2]), Time: int64(v[3])})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no ratings", path)
	}
	return out, nil
}

// Split holds out the last testFrac of each user's ratings by time (ties broken by item id) as
// the test set; the rest is the training set. Every user keeps at least one training rating.
func Split(ratings []Rating, testFrac float64) (train, test []Rating) {
	byUser := map[int64][]Rating{}
	var users []int64
	for _, r := range ratings {
		if _, ok := byUser[r.User]; !ok {
			users = append(users, r.User)
		}
		byUser[r.User] = append(byUser[r.User], r)
	}
	slices.Sort(users)
	for _, u := range users {
		rs := byUser[u]
		slices.SortFunc(rs, func(a, b Rating) int {
			return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Item, b.Item))
		})
		nTest := min(int(testFrac*float64(len(rs))+0.5), len(rs)-1)
		train = append(train, rs[:len(rs)-nTest]...)
		test = append(test, rs[len(rs)-nTest:]...)
	}
	return train, test
}
