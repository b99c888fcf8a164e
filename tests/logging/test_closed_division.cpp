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

// Each ruleset's closed_maskrcnn.yaml reads its own table: before 2.0.0 the learning rate is 0.02*K only.
TEST(ClosedDivision, EachRulesetReadsItsTable) {
  for (const std::string ruleset : {"1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0"}) {
    SCOPED_TRACE(ruleset);
    const auto file = detail::rule_file("training_" + ruleset + "/closed_maskrcnn.yaml");
    ASSERT_TRUE(file.has_value());
    for (const auto& rule : closed_division::rules(ruleset))
      for (const detail::KeyRule& k : file->keys)
        if (k.name == rule.key) {
          EXPECT_EQ(k.checks.at(0).text, rule.check);
        }
    const bool tensors = ruleset == "1.1.0" || ruleset == "2.0.0" || ruleset == "2.1.0";
    EXPECT_EQ(file->end.has_value(), tensors);
  }
  EXPECT_EQ(closed_division::rule("opt_base_learning_rate", "1.1.0").check, "is_integer(v['value'] / 0.02)");
  EXPECT_EQ(closed_division::rule("opt_base_learning_rate", "2.0.0").check, closed_division::rule("opt_base_learning_rate").check);
  EXPECT_FALSE(detail::rule_file("training_4.0.0/closed_maskrcnn.yaml").has_value());
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
