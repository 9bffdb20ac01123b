// Command benchfmt turns `go test -bench` output into the project's BENCH lines.
//
// It reads benchmark results from standard input and pairs sub-benchmarks named
// "<anything>/<id>/ours" and "<anything>/<id>/baseline" (the same run, side by side), taking the
// median ns/op of each over -count repetitions, and prints one line per id:
//
//	BENCH name=<id> unit=ns/op ours=<n> baseline=<n> speedup=<baseline/ours> baseline_is=<what>
//
// Usage:
//
//	go test -run='^$' -bench='^BenchmarkTransform$' -benchmem -count=5 ./canonical/ |
//	    go run ./internal/dev/benchfmt -baseline-is=gowebpki/jcs
//
// It exits 1 if no pair was found, or if an id has only one side, and passes the input through
// to standard error so failures stay visible.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	baselineIs := flag.String("baseline-is", "", "what the baseline is, for baseline_is= (required)")
	flag.Parse()
	if *baselineIs == "" || strings.ContainsAny(*baselineIs, " \t\n") {
		fmt.Fprintln(os.Stderr, "benchfmt: -baseline-is is required and must not contain white space")
		os.Exit(2)
	}
	lines, err := format(io.TeeReader(os.Stdin, os.Stderr), *baselineIs)
	for _, l := range lines {
		fmt.Println(l)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchfmt:", err)
		os.Exit(1)
	}
}

// resultLine matches "BenchmarkX/<id>/<side>-<procs> <iters> <ns> ns/op ...".
var resultLine = regexp.MustCompile(`^Benchmark\S*/([^/\s]+)/(ours|baseline)(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op`)

// format reads benchmark output and returns the BENCH lines, in the order ids first appear.
func format(r io.Reader, baselineIs string) ([]string, error) {
	type sides struct{ ours, baseline []float64 }
	byID := map[string]*sides{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := resultLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[3], 64)
		if err != nil || ns <= 0 {
			return nil, fmt.Errorf("bad ns/op in %q", sc.Text())
		}
		s := byID[m[1]]
		if s == nil {
			s = &sides{}
			byID[m[1]] = s
			order = append(order, m[1])
		}
		if m[2] == "ours" {
			s.ours = append(s.ours, ns)
		} else {
			s.baseline = append(s.baseline, ns)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return nil, errors.New("no .../<id>/ours and .../<id>/baseline benchmark results in the input")
	}
	var out []string
	var missing []string
	for _, id := range order {
		s := byID[id]
		if len(s.ours) == 0 || len(s.baseline) == 0 {
			missing = append(missing, id)
			continue
		}
		ours, base := median(s.ours), median(s.baseline)
		out = append(out, fmt.Sprintf("BENCH name=%s unit=ns/op ours=%s baseline=%s speedup=%s baseline_is=%s",
			id, num(ours), num(base), strconv.FormatFloat(base/ours, 'f', 2, 64), baselineIs))
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("no pair for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// num prints a figure with no exponent and at most one decimal.
func num(f float64) string {
	if f >= 100 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}
