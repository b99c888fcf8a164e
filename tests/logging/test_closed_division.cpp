#include "logging/closed_division.h"

#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>
#include <string>

#include "logging/compliance_rules.h"

namespace mrcnn::logging {
namespace {

// `check` runs each rule of the table as closed_maskrcnn.yaml's CHECK on its key, quoting the
// table's text: a CHECK written apart from the table, or a table rule the rule file lacks, fails.
TEST(ClosedDivision, CheckReadsTheRuleTable) {
  const auto file = detail::rule_file("training_3.1.0/closed_maskrcnn.yaml");
  ASSERT_TRUE(file.has_value());
  ASSERT_EQ(closed_division::rules().size(), 4u);
  for (const auto& rule : closed_division::rules()) {
    SCOPED_TRACE(std::string(rule.key));
    int found = 0;
    for (const detail::KeyRule& k : file->keys) {
      if (k.name != rule.key) continue;
      ++found;
      ASSERT_EQ(k.checks.size(), 1u);
      EXPECT_EQ(k.checks[0].text, rule.check);
    }
    EXPECT_EQ(found, 1);
  }
}

TEST(ClosedDivision, RulesSayTheOfficialLimits) {
  EXPECT_TRUE(closed_division::near_integer(3.000001));
  EXPECT_FALSE(closed_division::near_integer(3.0001));
  EXPECT_FALSE(closed_division::near_integer(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(closed_division::near_integer(std::numeric_limits<double>::infinity()));
  EXPECT_THROW((void)closed_division::rule("opt_weight_decay"), std::out_of_range);
  EXPECT_EQ(closed_division::rule("opt_learning_rate_decay_factor").check, "v['value'] == 0.1");
}

}  // namespace
}  // namespace mrcnn::logging
