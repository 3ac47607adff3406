package jetstream

// fairShare is the most partitions a member aims at: ceil(n/members), with
// at least one member (the caller, whose own key may not be listed yet).
func fairShare(n, members int) int {
	members = max(members, 1)
	return (n + members - 1) / members
}

// plan is one member's step towards its fair share of n partitions among
// members: owned are the partitions it holds, free those nobody holds (both
// in increasing order, disjoint). Above the share it releases its highest
// partitions; below it, it claims the lowest free ones, up to the share.
// Every member applying the same rule to the same view converges to an
// assignment where each holds at most the share and none is free (the
// shares sum to at least n). Pure and deterministic: the balance tests
// drive it.
func plan(n, members int, owned, free []int32) (release, claim []int32) {
	share := fairShare(n, members)
	if len(owned) > share {
		return owned[share:], nil
	}
	return nil, free[:min(len(free), share-len(owned))]
}
