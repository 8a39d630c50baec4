// Test fixture in the layout of karpenter-provider-aws's generated price maps.

package pricing

// generated at 2024-11-06T01:00:11Z for cn-north-1

import ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

var InitialOnDemandPricesCN = map[string]map[ec2types.InstanceType]float64{
	"cn-north-1": {
		"c5.large": 0.739000,
	},
}
