package main

import (
	"io"
	"os"
)

// color is an ANSI SGR parameter.
type color string

// Colours for verdicts and failures; nothing else is coloured.
const (
	colorOK   color = "32"   // green: ok, clean, verified
	colorWarn color = "33"   // yellow: warnings, unsupported
	colorFail color = "1;31" // bold red: invalid, dangerous, errors
)

// palette paints text for one output stream: in colour when the stream is
// a terminal and the user has not asked for none (NO_COLOR set to anything,
// as no-color.org says, or TERM=dumb); never in a pipe or a file.
type palette struct{ on bool }

func paletteFor(w io.Writer) palette {
	return palette{on: isTerminal(w) && colorWanted(os.Getenv)}
}

func colorWanted(getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// paint returns s in colour c, or s itself.
func (p palette) paint(c color, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + string(c) + "m" + s + "\x1b[0m"
}
