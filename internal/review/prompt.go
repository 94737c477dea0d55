package review

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/taskloom/taskloom/nodes"
)

// DecideInteractively asks for a decision on each selected escalation.
func (rv *Review) DecideInteractively(p *Prompter, selected []Escalation) error {
	fmt.Fprintf(p.out, "run %s is paused for human review: %d escalated task(s)\n", rv.runID, len(rv.pending))
	for i, e := range selected {
		fmt.Fprintln(p.out)
		cut := rv.showOne(p.out, e, i, len(selected), false)
		d, err := rv.ask(p, e, i, len(selected), cut)
		if err != nil {
			return err
		}
		if d.Action == nodes.ActionAbort {
			rv.abort(d)
			return nil
		}
		fmt.Fprintf(p.out, "→ %s %s\n", d.Action, e.payload.TaskID)
	}
	return nil
}

// ask prompts for e's decision until one is confirmed and allowed.
func (rv *Review) ask(p *Prompter, e Escalation, i, n int, cut bool) (nodes.Decision, error) {
	menu := "[f]ixed  [r]etry  [s]kip  [a]bort"
	if cut {
		menu += "  [v]iew all"
	}
	for {
		answer, err := p.ask(fmt.Sprintf("%s: %s > ", e.payload.TaskID, menu))
		if err != nil {
			return nodes.Decision{}, err
		}
		var d nodes.Decision
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "f", "fixed":
			d.Action = nodes.ActionFixed
		case "r", "retry":
			d.Action = nodes.ActionRetry
			q := "note for the worker's next attempt (optional, Enter for none): "
			if e.payload.Reason == nodes.ReasonQuestion {
				q = "your answer to the worker's question (Enter for none): "
			}
			note, err := p.ask(q)
			if err != nil {
				return d, err
			}
			d.Note = strings.TrimSpace(note)
		case "s", "skip":
			d.Action = nodes.ActionSkip
		case "a", "abort":
			yes, err := p.Confirm("Abort the whole run? Every escalated task is answered with abort.", false)
			if err != nil {
				return d, err
			}
			if yes {
				return nodes.Decision{Action: nodes.ActionAbort}, nil
			}
			continue
		case "v", "view":
			var b strings.Builder
			rv.showOne(&b, e, i, n, true)
			if err := p.page(b.String()); err != nil {
				return d, err
			}
			continue
		case "":
			continue
		default:
			fmt.Fprintln(p.out, "type f, r, s or a (then Enter)")
			continue
		}
		question := fmt.Sprintf("%s %s", strings.ToUpper(d.Action[:1])+d.Action[1:], e.payload.TaskID)
		if d.Note != "" {
			question += fmt.Sprintf(" with the note %q", d.Note)
		}
		yes, err := p.Confirm(question+"?", true)
		if err != nil {
			return d, err
		}
		if !yes {
			continue
		}
		if err := rv.decide(e, d); err != nil {
			fmt.Fprintln(p.out, err)
			continue
		}
		return d, nil
	}
}

// Prompter reads a person's answers line by line. A read blocks in its own
// goroutine so that an interrupt (ctx) ends the review at once.
type Prompter struct {
	ctx   context.Context
	in    io.Reader
	out   io.Writer
	lines chan promptLine
	ended bool // the input ended
}

type promptLine struct {
	text string
	err  error
}

func NewPrompter(ctx context.Context, in io.Reader, out io.Writer) *Prompter {
	return &Prompter{ctx: ctx, in: in, out: out}
}

// ErrCancelled ends a review whose input ended, or that was
// interrupted, before its decisions were taken.
var ErrCancelled = errors.New("review cancelled before all decisions were taken; nothing was recorded")

func (p *Prompter) ask(prompt string) (string, error) {
	io.WriteString(p.out, prompt)
	if p.ended {
		fmt.Fprintln(p.out)
		return "", ErrCancelled
	}
	if p.lines == nil {
		p.lines = make(chan promptLine)
		go func() {
			r := bufio.NewReader(p.in)
			for {
				text, err := r.ReadString('\n')
				if text != "" || err == nil {
					if !p.send(promptLine{text: strings.TrimRight(text, "\r\n")}) {
						return
					}
				}
				if err != nil {
					p.send(promptLine{err: err})
					return
				}
			}
		}()
	}
	select {
	case <-p.ctx.Done():
		fmt.Fprintln(p.out)
		return "", ErrCancelled
	case l := <-p.lines:
		if l.err != nil {
			p.ended = true
			fmt.Fprintln(p.out)
			return "", ErrCancelled
		}
		return l.text, nil
	}
}

// send hands a line to ask, unless the review is over.
func (p *Prompter) send(l promptLine) bool {
	select {
	case p.lines <- l:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// Confirm asks a yes/no question; Enter means def.
func (p *Prompter) Confirm(question string, def bool) (bool, error) {
	hint := "[y/N]"
	if def {
		hint = "[Y/n]"
	}
	for {
		answer, err := p.ask(question + " " + hint + " ")
		if err != nil {
			return false, err
		}
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "":
			return def, nil
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
	}
}

// page prints text a screen at a time.
func (p *Prompter) page(text string) error {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for len(lines) > 0 {
		n := min(reviewPageLines, len(lines))
		for _, l := range lines[:n] {
			fmt.Fprintln(p.out, l)
		}
		lines = lines[n:]
		if len(lines) == 0 {
			break
		}
		answer, err := p.ask(fmt.Sprintf("-- %d more line(s): Enter for more, q to stop -- ", len(lines)))
		if err != nil {
			return err
		}
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "q") {
			break
		}
	}
	return nil
}
