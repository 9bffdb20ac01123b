package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
BenchmarkTransform/canonical_1k/ours-2         	  105496	     11000 ns/op	  89.54 MB/s	    1152 B/op	       1 allocs/op
BenchmarkTransform/canonical_1k/baseline-2     	   17740	     66000 ns/op	  15.71 MB/s	   18329 B/op	     436 allocs/op
BenchmarkTransform/canonical_64k/ours-2        	    1275	    800000 ns/op
BenchmarkTransform/canonical_1k/ours-2         	  105496	     13000 ns/op
BenchmarkTransform/canonical_1k/ours-2         	  105496	     12000 ns/op
BenchmarkTransform/canonical_64k/baseline-2    	     296	   4000000 ns/op
PASS
`

func TestFormat(t *testing.T) {
	lines, err := format(strings.NewReader(sample), "gowebpki/jcs")
	require.NoError(t, err)
	require.Equal(t, []string{
		"BENCH name=canonical_1k unit=ns/op ours=12000 baseline=66000 speedup=5.50 baseline_is=gowebpki/jcs",
		"BENCH name=canonical_64k unit=ns/op ours=800000 baseline=4000000 speedup=5.00 baseline_is=gowebpki/jcs",
	}, lines)
}

func TestFormatMissingSide(t *testing.T) {
	lines, err := format(strings.NewReader("BenchmarkX/a/ours-2 10 5.5 ns/op\n"), "x")
	require.ErrorContains(t, err, "no pair for a")
	require.Empty(t, lines)
	_, err = format(strings.NewReader("PASS\n"), "x")
	require.Error(t, err)
}
