package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/internal/session"
)

func newMigrateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the store's schema migrations",
		Long: "Apply the store's schema migrations. The store is --db, else TASKLOOM_DB, else\n" +
			"database.url of .project-config.json, else the SQLite database\n" +
			".taskloom/taskloom.db in the current directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("find the current directory: %w", err)
			}
			// --db, then TASKLOOM_DB, then the config's database.url.
			cfg, err := session.LoadConfig(cmd.Flags(), wd, "")
			if err != nil {
				return err
			}
			res, err := session.Migrate(cmd.Context(), cfg.Database.URL, wd)
			if err != nil {
				return err
			}
			for _, v := range res.Versions {
				fmt.Fprintf(a.stdout, "applied %s\n", v.ID())
			}
			fmt.Fprintf(a.stdout, "schema is up to date at version %d\n", res.Version)
			return nil
		},
	}
	cmd.Flags().String("db", "", "database URL (postgres://… or a SQLite file path)")
	return cmd
}
