package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// writeCurve writes the training curve as curve.csv in dir and, when gnuplot is installed,
// draws it as curve.png; without gnuplot, or when it fails, it says that it skipped the picture.
func writeCurve(dir string, res Result, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var csv bytes.Buffer
	fmt.Fprintln(&csv, "epoch,mf_train_rmse,mf_test_rmse,biases_test_rmse,global_mean_test_rmse")
	for i := range res.MF {
		fmt.Fprintf(&csv, "%d,%.5f,%.5f,%.5f,%.5f\n", i+1, res.MFTrain[i], res.MF[i], res.Biases, res.GlobalMean)
	}
	csvPath := filepath.Join(dir, "curve.csv")
	if err := os.WriteFile(csvPath, csv.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "training curve: %s\n", csvPath)
	gnuplot, err := exec.LookPath("gnuplot")
	if err != nil {
		fmt.Fprintln(out, "gnuplot not found (apt-get install gnuplot-nox): skipped the PNG")
		return nil
	}
	png := filepath.Join(dir, "curve.png")
	script := fmt.Sprintf(`set terminal pngcairo size 800,500
set output %q
set datafile separator ","
set key top right
set title "MovieLens (dslabs): test = each user's latest ratings"
set xlabel "epoch"
set ylabel "RMSE"
set grid
plot %[2]q using 1:2 with linespoints title "MF train", \
     %[2]q using 1:3 with linespoints title "MF test", \
     %[2]q using 1:4 with lines dashtype 2 title "biases only, test", \
     %[2]q using 1:5 with lines dashtype 3 title "global mean, test"
`, png, csvPath)
	cmd := exec.Command(gnuplot)
	cmd.Stdin = bytes.NewBufferString(script)
	if msg, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(out, "gnuplot failed (%v: %s): skipped the PNG\n", err, bytes.TrimSpace(msg))
		return nil
	}
	fmt.Fprintf(out, "training curve picture: %s\n", png)
	return nil
}
