package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

func TestMaskURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://u@h/db", "postgresql://u@h/db"},
		{"postgres://h/db?password=secret&sslmode=disable", "postgres://h/db?password=xxxxx&sslmode=disable"},
		{"host=h user=u password=secret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"/var/lib/taskloom.db", "/var/lib/taskloom.db"},
		{"", ""},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, checkpoint.MaskURL(tc.in), "MaskURL(%q)", tc.in)
	}
}
