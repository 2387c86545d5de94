package embedding

import (
	"encoding/json"
	"hash/crc32"
)

// The manifest's checksum. A manifest of version 2 carries manifest_crc32c, the CRC-32C
// (Castagnoli) of its canonical bytes: the compact encoding/json encoding of the manifest as
// parsed (fields in the order of the manifest struct, map keys sorted, numbers as Go writes
// them), without manifest_crc32c. Computed from the parsed values, it covers everything a load
// uses, and nothing else: a flipped byte that changes a value, or a key (the value is then
// lost), changes the canonical bytes; one in the white space does not matter. A load checks it
// before it uses anything in the manifest but the format and version that say whether it is
// there (version 1 manifests, written before it, have none and are read as they were).

// manifestSum is the CRC-32C of m's canonical bytes.
func manifestSum(m manifest) (uint32, error) {
	m.Checksum = nil
	b, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	return crc32.Checksum(b, castagnoli), nil
}

// checkManifestSum checks m's version and, for version 2, its checksum (ErrCorrupt).
func checkManifestSum(m manifest) error {
	const op = "load"
	switch m.Version {
	case 1:
		if m.Checksum == nil {
			return nil
		}
	case manifestVersion:
		if m.Checksum == nil {
			return corrupt(op, "", "manifest: version %d without manifest_crc32c", m.Version)
		}
	default:
		return corrupt(op, "", "manifest: version %d, this gorec reads versions 1 and %d", m.Version, manifestVersion)
	}
	sum, err := manifestSum(m)
	if err != nil {
		return corrupt(op, "", "manifest: %w", err)
	}
	if sum != *m.Checksum {
		return corrupt(op, "", "manifest: checksum %d, its contents give %d", *m.Checksum, sum)
	}
	return nil
}
