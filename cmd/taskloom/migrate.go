package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newMigrateCmd(a *app) *cobra.Command {
	var dbURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the store's schema migrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("migrate: not implemented yet")
		},
	}
	cmd.Flags().StringVar(&dbURL, "db", "", "database URL (postgres://… or a SQLite file path)")
	return cmd
}
