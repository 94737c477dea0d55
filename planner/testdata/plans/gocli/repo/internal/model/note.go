package model

// Note is one note.
type Note struct {
	ID    string
	Title string
}
