// Package ui serves a run as a live web page: `taskloom ui`.
//
// The page shows the plan as a graph laid out by its dependencies (layers
// by longest path from the tasks without dependencies, ordered within a
// layer by the barycentre of their dependencies, milestones as bands), with
// each task coloured by its status and naming it in text and in its
// accessible label, the critical path marked, the workers and what they
// do, each task's attempts with their diffs, test output, errors and
// conversations, and the usage and cost per task and in total. Escalated
// tasks are reviewed from the page: fixed, retry (with a note), skip and
// abort are recorded by the review that `taskloom review` runs
// (internal/review: checked with nodes.ApplyDecision, stored as the answer
// to the task's interrupt), and `taskloom resume` acts on them.
//
// Everything is rendered by the server: html/template for the page, the
// layout computed in Go and drawn as SVG by the template, and one small
// hand-written script that listens to Server-Sent Events and fetches a
// task's detail. Every asset is embedded, so the page makes no request
// beyond its own server and works offline; nothing is built with Node.
//
// The server reads the store, so it follows a run that another process
// drives as well as a finished one: it polls the run's newest checkpoint
// and turns what changed into the events that run --json prints
// (nodes.Tracker), which the page applies without reloading.
//
// Access: the server listens on loopback unless told otherwise
// (AllowRemote), and refuses requests whose Host is not its own (DNS
// rebinding). Off loopback every request carries a random token, printed
// in the URL at start. State-changing requests are POSTs that carry the
// page's per-server CSRF token in a header, come from the page's own
// Origin, and are same-origin by Sec-Fetch-Site when the browser says so.
package ui
