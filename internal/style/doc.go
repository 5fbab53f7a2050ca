// Package style holds the tests of the code's shape that a machine can
// check: no product function over 60 lines.
package style
