package render

import "example.com/notes/internal/model"

// Text renders a note as text.
func Text(n model.Note) string { return n.Title }
