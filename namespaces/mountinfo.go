package namespaces

import (
	"strconv"
	"strings"
)

// UnescapeMountinfo undoes the octal escapes of a path in
// /proc/<pid>/mountinfo (\040 for a space, \134 for a backslash); a
// backslash not followed by three octal digits is kept.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
