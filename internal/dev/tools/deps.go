//go:build tools

package tools

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/gowebpki/jcs"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.uber.org/goleak"
	_ "go.uber.org/mock/gomock"
	_ "golang.org/x/text/unicode/norm"
)
