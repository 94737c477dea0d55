// Package linear mirrors a run's tasks to Linear (linear.app): an issue
// per task, in a project per run, moved through the team's workflow
// states as the task's status changes.
//
// Client is a small GraphQL client for the few operations needed (team
// and workflow-state lookup, issueCreate, issueUpdate, projectCreate, and
// finding an issue or project again by its ID). The API key is given to
// it by the caller, from LINEAR_API_KEY; it is sent only in the
// Authorization header and is removed from every error.
//
// Sync is driven by the run's task updates and works in the background:
// every call it makes is retried with backoff, and a Linear that is down
// never fails or slows a run. Issues and projects are created with IDs
// derived from the run and task IDs, so a resumed run (or a retried
// request whose answer was lost) finds them again instead of creating
// duplicates.
package linear

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/clip"
)

// DefaultURL is Linear's GraphQL endpoint.
const DefaultURL = "https://api.linear.app/graphql"

// KeyEnv is the environment variable the API key is read from.
const KeyEnv = "LINEAR_API_KEY"

// Client calls Linear's GraphQL API.
type Client struct {
	URL  string // DefaultURL when empty
	key  string
	HTTP *http.Client
}

// NewClient returns a client with the API key.
func NewClient(url, key string) *Client {
	if url == "" {
		url = DefaultURL
	}
	return &Client{URL: url, key: key, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// ErrNotFound is an entity Linear does not have.
var ErrNotFound = errors.New("not found")

// ErrUnauthorized is a request Linear refused for its key. Retrying does
// not help: the user must set another key.
var ErrUnauthorized = errors.New("Linear refused the key in LINEAR_API_KEY; set a valid personal API key")

// ErrUnknownTeam is a team_id Linear does not know, or that the key
// cannot see. Retrying does not help: the config must change.
var ErrUnknownTeam = errors.New("no such Linear team for this key; set integrations.linear.team_id to a team's ID or key")

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// do sends one operation and decodes its data into out.
func (c *Client) do(ctx context.Context, op, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"operationName": op, "query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return c.redact(fmt.Errorf("linear %s: %w", op, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", c.key)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.redact(fmt.Errorf("linear %s: %w", op, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return c.redact(fmt.Errorf("linear %s: %w", op, err))
	}
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("linear %s: %w (HTTP %d)", op, ErrUnauthorized, resp.StatusCode)
	}
	if jerr := json.Unmarshal(data, &env); jerr != nil || resp.StatusCode/100 != 2 && len(env.Errors) == 0 {
		return c.redact(fmt.Errorf("linear %s: HTTP %d: %s", op, resp.StatusCode, clip.Line(string(data), 200)))
	}
	if len(env.Errors) > 0 {
		e := env.Errors[0]
		code, _ := e.Extensions["code"].(string)
		if code == "AUTHENTICATION_ERROR" || code == "FORBIDDEN" || strings.Contains(strings.ToLower(e.Message), "authentication required") {
			return fmt.Errorf("linear %s: %w", op, ErrUnauthorized)
		}
		if code == "ENTITY_NOT_FOUND" || strings.Contains(strings.ToLower(e.Message), "not found") {
			return fmt.Errorf("linear %s: %w: %s", op, ErrNotFound, c.redact(errors.New(e.Message)))
		}
		return c.redact(fmt.Errorf("linear %s: %s", op, e.Message))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Data, out)
}

// redact removes the key from an error's text.
func (c *Client) redact(err error) error {
	if err == nil {
		return nil
	}
	if c.key != "" && strings.Contains(err.Error(), c.key) {
		return errors.New(config.RedactURLs(strings.ReplaceAll(err.Error(), c.key, "[LINEAR_API_KEY]")))
	}
	// The URL of a failed request is quoted whole, a token in its query
	// and all.
	if msg := config.RedactURLs(err.Error()); msg != err.Error() {
		return &redacted{msg: msg, err: err}
	}
	return err
}

// redacted is an error shown with a redacted message; errors.Is and As
// still see what it wraps.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// State is a workflow state of a team. Type is one of Linear's state
// types: triage, backlog, unstarted, started, completed, canceled.
type State struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Position float64 `json:"position"`
}

// TeamStates returns a team's workflow states.
func (c *Client) TeamStates(ctx context.Context, teamID string) ([]State, error) {
	var out struct {
		Team struct {
			ID     string `json:"id"`
			States struct {
				Nodes []State `json:"nodes"`
			} `json:"states"`
		} `json:"team"`
	}
	err := c.do(ctx, "TeamStates", `query TeamStates($id: String!) {
  team(id: $id) { id states { nodes { id name type position } } }
}`, map[string]any{"id": teamID}, &out)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("linear TeamStates: team %q: %w", teamID, ErrUnknownTeam)
	}
	if err != nil {
		return nil, err
	}
	return out.Team.States.Nodes, nil
}

// Issue is what the sync needs of an issue.
type Issue struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	State      struct {
		ID string `json:"id"`
	} `json:"state"`
}

// Issue returns an issue by its ID; ErrNotFound when there is none.
func (c *Client) Issue(ctx context.Context, id string) (Issue, error) {
	var out struct {
		Issue *Issue `json:"issue"`
	}
	err := c.do(ctx, "Issue", `query Issue($id: String!) {
  issue(id: $id) { id identifier state { id } }
}`, map[string]any{"id": id}, &out)
	if err == nil && out.Issue == nil {
		err = fmt.Errorf("linear Issue: %w", ErrNotFound)
	}
	if err != nil {
		return Issue{}, err
	}
	return *out.Issue, nil
}

// IssueInput is an issueCreate's input.
type IssueInput struct {
	ID          string `json:"id,omitempty"`
	TeamID      string `json:"teamId"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	StateID     string `json:"stateId,omitempty"`
	ProjectID   string `json:"projectId,omitempty"`
}

// CreateIssue creates an issue.
func (c *Client) CreateIssue(ctx context.Context, in IssueInput) (Issue, error) {
	var out struct {
		IssueCreate struct {
			Success bool   `json:"success"`
			Issue   *Issue `json:"issue"`
		} `json:"issueCreate"`
	}
	err := c.do(ctx, "IssueCreate", `mutation IssueCreate($input: IssueCreateInput!) {
  issueCreate(input: $input) { success issue { id identifier state { id } } }
}`, map[string]any{"input": in}, &out)
	if err == nil && (!out.IssueCreate.Success || out.IssueCreate.Issue == nil) {
		err = errors.New("linear IssueCreate: not successful")
	}
	if err != nil {
		return Issue{}, err
	}
	return *out.IssueCreate.Issue, nil
}

// UpdateIssueState moves an issue to a workflow state.
func (c *Client) UpdateIssueState(ctx context.Context, id, stateID string) error {
	var out struct {
		IssueUpdate struct {
			Success bool `json:"success"`
		} `json:"issueUpdate"`
	}
	err := c.do(ctx, "IssueUpdate", `mutation IssueUpdate($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success issue { id state { id } } }
}`, map[string]any{"id": id, "input": map[string]any{"stateId": stateID}}, &out)
	if err == nil && !out.IssueUpdate.Success {
		err = errors.New("linear IssueUpdate: not successful")
	}
	return err
}

// Project returns whether a project exists; ErrNotFound when it does not.
func (c *Client) Project(ctx context.Context, id string) error {
	var out struct {
		Project *struct {
			ID string `json:"id"`
		} `json:"project"`
	}
	err := c.do(ctx, "Project", `query Project($id: String!) { project(id: $id) { id } }`, map[string]any{"id": id}, &out)
	if err == nil && out.Project == nil {
		err = fmt.Errorf("linear Project: %w", ErrNotFound)
	}
	return err
}

// CreateProject creates a project of the teams with the given ID.
func (c *Client) CreateProject(ctx context.Context, id, name string, teamIDs []string) error {
	var out struct {
		ProjectCreate struct {
			Success bool `json:"success"`
		} `json:"projectCreate"`
	}
	err := c.do(ctx, "ProjectCreate", `mutation ProjectCreate($input: ProjectCreateInput!) {
  projectCreate(input: $input) { success project { id } }
}`, map[string]any{"input": map[string]any{"id": id, "name": name, "teamIds": teamIDs}}, &out)
	if err == nil && !out.ProjectCreate.Success {
		err = errors.New("linear ProjectCreate: not successful")
	}
	return err
}

// StableID is the UUID (in v4 form, as Linear's create inputs take) that
// the sync gives the entity named by parts: the same parts always give
// the same ID, so a resumed run finds what it created before.
func StableID(parts ...string) string {
	sum := sha1.Sum([]byte("taskloom\x00" + strings.Join(parts, "\x00")))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
