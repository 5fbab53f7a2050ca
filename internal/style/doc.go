// Package style holds the tests of the code's shape that a machine can
// check: no product function over 60 lines, and a layout that shows the
// product (in cmd/, cri-nstarget* ships and nstarget-* is a developer tool; the product imports nothing of the lab).
package style
