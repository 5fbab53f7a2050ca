// Package style holds the tests of the code's shape that a machine can
// check: no product function over 60 lines, and a layout that shows the
// product (cmd/ holds only what ships, and it imports nothing under internal/).
package style
