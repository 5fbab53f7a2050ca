package criwire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// field is one field of a message as it came on the wire.
type field struct {
	num protowire.Number
	typ protowire.Type
	raw []byte // the whole field: tag and value
	val []byte // a length-delimited field's payload (without its length)
	u   uint64 // a varint's value
}

// fields splits message m into its fields, in order. It fails where m is not
// well-formed protobuf (a truncated field, a bad tag, an unmatched group).
func fields(m []byte) ([]field, error) {
	var fs []field
	for off := 0; off < len(m); {
		num, typ, n := protowire.ConsumeTag(m[off:])
		if n < 0 {
			return nil, fmt.Errorf("at byte %d: %w", off, protowire.ParseError(n))
		}
		vn := protowire.ConsumeFieldValue(num, typ, m[off+n:])
		if vn < 0 {
			return nil, fmt.Errorf("field %d at byte %d: %w", num, off, protowire.ParseError(vn))
		}
		f := field{num: num, typ: typ, raw: m[off : off+n+vn]}
		switch typ {
		case protowire.BytesType:
			f.val, _ = protowire.ConsumeBytes(m[off+n:])
		case protowire.VarintType:
			f.u, _ = protowire.ConsumeVarint(m[off+n:])
		}
		fs = append(fs, f)
		off += n + vn
	}
	return fs, nil
}

// bytes reports whether f is field num declared length-delimited (a string or
// a message): with another wire type, protobuf keeps it as an unknown field.
func (f field) bytes(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.BytesType
}

// varint: f is field num declared as a varint (an enum, a uint32).
func (f field) varint(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.VarintType
}

// walk calls fn for every field of m, in order.
func walk(m []byte, fn func(field) error) error {
	fs, err := fields(m)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// edit returns m with the payload p of every occurrence of the
// length-delimited field num replaced by fn(p, last), last telling the last
// occurrence; every other field is copied as it came, in its place.
func edit(m []byte, num protowire.Number, fn func(p []byte, last bool) ([]byte, error)) ([]byte, error) {
	fs, err := fields(m)
	if err != nil {
		return nil, err
	}
	last := -1
	for i, f := range fs {
		if f.bytes(num) {
			last = i
		}
	}
	out := make([]byte, 0, len(m)+64)
	for i, f := range fs {
		if !f.bytes(num) {
			out = append(out, f.raw...)
			continue
		}
		p, err := fn(f.val, i == last)
		if err != nil {
			return nil, fmt.Errorf("field %d: %w", num, err)
		}
		out = protowire.AppendTag(out, num, protowire.BytesType)
		out = protowire.AppendBytes(out, p)
	}
	return out, nil
}
