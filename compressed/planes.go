package compressed

import (
	"encoding/binary"
	"math/bits"
)

// splitPlanes writes byte j of every w-byte little-endian element of src
// into planes[j], after rotating each element left by one bit when rot is
// set: that moves the sign bit to the bottom and the whole exponent of a
// BF16, F32 or F64 value into the top byte, where it compresses alone.
func splitPlanes(planes [][]byte, src []byte, w int, rot bool) {
	n := len(src) / w
	switch {
	case w == 2 && rot:
		p0, p1 := planes[0][:n], planes[1][:n]
		i := 0
		// Eight elements at a time: rotate each 16-bit lane left by one,
		// then gather the even bytes into one plane and the odd into the other.
		for ; i+8 <= n; i += 8 {
			s := src[2*i : 2*i+16]
			lo := binary.LittleEndian.Uint64(s[:8])
			hi := binary.LittleEndian.Uint64(s[8:])
			lo = lo<<1&0xFFFEFFFEFFFEFFFE | lo>>15&0x0001000100010001
			hi = hi<<1&0xFFFEFFFEFFFEFFFE | hi>>15&0x0001000100010001
			binary.LittleEndian.PutUint64(p0[i:i+8], uint64(gather(lo))|uint64(gather(hi))<<32)
			binary.LittleEndian.PutUint64(p1[i:i+8], uint64(gather(lo>>8))|uint64(gather(hi>>8))<<32)
		}
		for ; i < n; i++ {
			v := bits.RotateLeft16(binary.LittleEndian.Uint16(src[2*i:]), 1)
			p0[i], p1[i] = byte(v), byte(v>>8)
		}
	case w == 4 && rot:
		p0, p1, p2, p3 := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n]
		for i := range n {
			v := bits.RotateLeft32(binary.LittleEndian.Uint32(src[4*i:]), 1)
			p0[i], p1[i], p2[i], p3[i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
	case w == 8 && rot:
		for i := range n {
			v := bits.RotateLeft64(binary.LittleEndian.Uint64(src[8*i:]), 1)
			for j := range 8 {
				planes[j][i] = byte(v >> (8 * j))
			}
		}
	default:
		for i := range n {
			e := src[i*w : i*w+w]
			for j := range w {
				planes[j][i] = e[j]
			}
		}
	}
}

// joinPlanes is the inverse of splitPlanes.
func joinPlanes(dst []byte, planes [][]byte, w int, rot bool) {
	n := len(dst) / w
	switch {
	case w == 2 && rot:
		p0, p1 := planes[0][:n], planes[1][:n]
		d := dst[:2*n]
		i := joinRot2Fast(d, p0, p1, n)
		// Eight elements at a time: spread the bytes of each plane into
		// alternate bytes, merge, rotate each 16-bit lane right by one.
		for ; i+8 <= n; i += 8 {
			a := binary.LittleEndian.Uint64(p0[i : i+8])
			b := binary.LittleEndian.Uint64(p1[i : i+8])
			o := d[2*i : 2*i+16]
			lo := spread(uint32(a)) | spread(uint32(b))<<8
			hi := spread(uint32(a>>32)) | spread(uint32(b>>32))<<8
			binary.LittleEndian.PutUint64(o[:8], lo>>1&0x7FFF7FFF7FFF7FFF|lo<<15&0x8000800080008000)
			binary.LittleEndian.PutUint64(o[8:], hi>>1&0x7FFF7FFF7FFF7FFF|hi<<15&0x8000800080008000)
		}
		for ; i < n; i++ {
			v := uint16(p0[i]) | uint16(p1[i])<<8
			binary.LittleEndian.PutUint16(d[2*i:], bits.RotateLeft16(v, -1))
		}
	case w == 4 && rot:
		p0, p1, p2, p3 := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n]
		d := dst[:4*n]
		for i := joinRot4Fast(d, p0, p1, p2, p3, n); i < n; i++ {
			v := uint32(p0[i]) | uint32(p1[i])<<8 | uint32(p2[i])<<16 | uint32(p3[i])<<24
			binary.LittleEndian.PutUint32(d[4*i:], bits.RotateLeft32(v, -1))
		}
	case w == 8 && rot:
		for i := range n {
			var v uint64
			for j := range 8 {
				v |= uint64(planes[j][i]) << (8 * j)
			}
			binary.LittleEndian.PutUint64(dst[8*i:], bits.RotateLeft64(v, -1))
		}
	default:
		for i := range n {
			e := dst[i*w : i*w+w]
			for j := range w {
				e[j] = planes[j][i]
			}
		}
	}
}

// spread moves byte k of x to byte 2k of the result, zeros between.
func spread(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000FFFF0000FFFF
	return (v | v<<8) & 0x00FF00FF00FF00FF
}

// gather moves byte 2k of v to byte k of the result (the inverse of spread).
func gather(v uint64) uint32 {
	v &= 0x00FF00FF00FF00FF
	v = (v | v>>8) & 0x0000FFFF0000FFFF
	return uint32(v | v>>16)
}
