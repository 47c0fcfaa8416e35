package runtime_test

import (
	"testing"
)

// TestPooledSandboxes runs the sandbox's property tests again with every
// `/bin/sh -c` command on bwrap in a sandbox a pool made ahead of the call
// (runSpec and runBwrap fail a run that did not take one): what holds for
// a new sandbox holds for a pooled one.
func TestPooledSandboxes(t *testing.T) {
	needBwrap(t)
	pooled = true
	defer func() { pooled = false }()
	for name, f := range map[string]func(*testing.T){
		"WorkspaceIsWritable":                    TestWorkspaceIsWritable,
		"WritingOutsideTheWorkspaceFails":        TestWritingOutsideTheWorkspaceFails,
		"ProtectedPaths":                         TestProtectedPaths,
		"GitCannotBeRedirected":                  TestGitCannotBeRedirected,
		"ProtectedSymlinksRefuseToStart":         TestProtectedSymlinksRefuseToStart,
		"HomeIsEmptyAndRealHomesHidden":          TestHomeIsEmptyAndRealHomesHidden,
		"TmpIsFreshPerCall":                      TestTmpIsFreshPerCall,
		"SecretsInTheEnvironmentStayOut":         TestSecretsInTheEnvironmentStayOut,
		"HostProcessesAreInvisible":              TestHostProcessesAreInvisible,
		"NoCapabilitiesInside":                   TestNoCapabilitiesInside,
		"NetworkNone":                            TestNetworkNone,
		"InheritedDescriptorsStayOut":            TestInheritedDescriptorsStayOut,
		"HostSocketsAreUnreachable":              TestHostSocketsAreUnreachable,
		"TimeoutKillsTheWholeTree":               TestTimeoutKillsTheWholeTree,
		"BackgroundJobsDieWithTheCommand":        TestBackgroundJobsDieWithTheCommand,
		"CancellationKillsTheTree":               TestCancellationKillsTheTree,
		"FloodKeepsMemoryFlat":                   TestFloodKeepsMemoryFlat,
		"NotFoundAndNotExecutable":               TestNotFoundAndNotExecutable,
		"WorkspaceAccess":                        TestWorkspaceAccess,
		"OwnSignalsAndStatuses":                  TestOwnSignalsAndStatuses,
		"AnErrorNeverReadsAsSuccess":             TestAnErrorNeverReadsAsSuccess,
		"TrustedStateIsHidden":                   TestTrustedStateIsHidden,
		"SideDoorsAreShut":                       TestSideDoorsAreShut,
		"VsockPortsStayFree":                     TestVsockPortsStayFree,
		"LoopbackListenerUnreachable":            TestLoopbackListenerUnreachable,
		"LimitsEndABombAndABalloon":              TestLimitsEndABombAndABalloon,
		"HostInterfacesHidden":                   TestHostInterfacesHidden,
		"HoppersDieAtTheDeadline":                TestHoppersDieAtTheDeadline,
		"GitFindsNoRepositoryATookMade":          TestGitFindsNoRepositoryATookMade,
		"GitStaysValidInAWorkspaceRepository":    TestGitStaysValidInAWorkspaceRepository,
		"GitfileTargetInsideIsProtected":         TestGitfileTargetInsideIsProtected,
		"ConfigNamedFilesAreProtected":           TestConfigNamedFilesAreProtected,
		"ConcurrentRunsKeepEachOthersProtection": TestConcurrentRunsKeepEachOthersProtection,
		"NestedWorkspace":                        TestNestedWorkspace,
		"TmpfsAreCapped":                         TestTmpfsAreCapped,
		"SubmodulesAreNotAWayIn":                 TestSubmodulesAreNotAWayIn,
	} {
		t.Run(name, f)
	}
}
